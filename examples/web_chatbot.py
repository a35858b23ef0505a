"""A multi-user web chatbot: one @llm_chat agent; per session a history and a PyRepl kernel.
Events stream as Server-Sent Events; input() is answered and turns are aborted over HTTP;
idle sessions are reclaimed. Needs the [web] extra (starlette, uvicorn).

    .venv/bin/python examples/web_chatbot.py     # the model from .env (OPENAI_MODEL ...)
    curl -N localhost:8000/chat/alice -H 'content-type: application/json' -d '{"message": "hi"}'

POST /chat/{sid} {"message"} streams the turn (each `data:` line is a `to_wire` event, the last
one the response); POST /input/{sid} {"request_id", "value"}; POST /abort/{sid}; GET /sessions.
"""

import contextlib

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from simplellmfunc import LLMInterface, OpenAICompatible, llm_chat
from simplellmfunc.exceptions import UserError
from simplellmfunc.serving import SessionStore, sse_stream


def make_app(llm: LLMInterface, idle_timeout: float = 900.0) -> Starlette:
    @llm_chat(llm, stream=True, enable_event=True)
    async def assistant(message: str, history: list | None = None):
        """You are a Python assistant. Run code with execute_code; variables persist.
        Use input() in your code when you need something from the user."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        async with SessionStore(
            assistant, pyrepl=True, pool_size=2, idle_timeout=idle_timeout
        ) as sessions:
            app.state.sessions = sessions
            yield

    def sessions(request: Request) -> SessionStore:
        return request.app.state.sessions

    async def chat(request: Request) -> StreamingResponse:
        message = (await request.json())["message"]
        turn = sessions(request).chat(request.path_params["sid"], message)
        return StreamingResponse(sse_stream(turn), media_type="text/event-stream")

    async def answer(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            sessions(request).submit_input(
                request.path_params["sid"], body["request_id"], body["value"]
            )
        except UserError as exc:  # unknown session, or the request timed out / was answered
            return JSONResponse({"ok": False, "error": str(exc)}, status_code=409)
        return JSONResponse({"ok": True})

    async def abort(request: Request) -> JSONResponse:
        try:
            aborted = sessions(request).abort(request.path_params["sid"], "stopped by the user")
        except UserError as exc:
            return JSONResponse({"aborted": False, "error": str(exc)}, status_code=404)
        return JSONResponse({"aborted": aborted})

    async def overview(request: Request) -> JSONResponse:
        return JSONResponse([s.info() for s in sessions(request).sessions.values()])

    routes = [
        Route("/chat/{sid}", chat, methods=["POST"]),
        Route("/input/{sid}", answer, methods=["POST"]),
        Route("/abort/{sid}", abort, methods=["POST"]),
        Route("/sessions", overview),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


if __name__ == "__main__":
    uvicorn.run(make_app(OpenAICompatible.from_env()), host="127.0.0.1", port=8000)
