"""The code that runs inside the kernel process: bootstrap, error details, fd-level output
capture, labels for background threads' output, and ``runtime`` (the client of the host bridge).

Standard library and IPython only. In the kernel these modules are imported under an alias
package whose ``__path__`` is this folder (see ``.._session``), so this ``__init__`` is not run
there and nothing of simplellmfunc, nor any of its dependencies, is loaded into the kernel. The
host imports ``_boot`` for the MIME types the two sides share.
"""
