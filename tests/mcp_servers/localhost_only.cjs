// Preloaded with `node --require` so a reference server listens on 127.0.0.1 only:
// server-everything calls app.listen(PORT) with no host, which would bind every interface.
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    if (args.length === 1 || typeof args[1] === "function") {
      args.splice(1, 0, "127.0.0.1");
    }
  }
  return listen.apply(this, args);
};
