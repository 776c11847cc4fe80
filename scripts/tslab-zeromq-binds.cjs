// Preloaded into the tslab kernel by run-notebooks.sh (NODE_OPTIONS=--require).
//
// zeromq 6 refuses send() and receive() on a socket while its bind() is pending (EBUSY,
// "Socket is blocked by a bind or unbind operation"). tslab 1.0.22 binds its five sockets
// in parallel after starting their receive loops, so a kernel_info request that arrives in
// that window throws in the shell loop and ends it: the kernel lives on, deaf, and the
// notebook fails after nbclient's start-up timeout (seen once in CI). Here send() and
// receive() try again every 10 ms while the socket is busy binding.
"use strict";
const { dirname } = require("node:path");

let zeromq;
try {
  zeromq = require(
    require.resolve("zeromq", {
      paths: [
        dirname(require.resolve("tslab/package.json", { paths: [process.cwd(), __dirname] })),
      ],
    }),
  );
} catch {
  return; // no tslab or zeromq where the kernel runs: nothing to mend
}
const prototype = zeromq.Socket.prototype;
const RETRY_MILLISECONDS = 10;
const RETRIES = 1000; // 10 s: a bind on loopback takes milliseconds

const isBusy = (error) => error !== null && typeof error === "object" && error.code === "EBUSY";
const later = () => new Promise((resolve) => setTimeout(resolve, RETRY_MILLISECONDS));

// bind() itself is not configurable; send() and receive() are: they retry while EBUSY.
for (const name of ["send", "receive"]) {
  const original = prototype[name];
  Object.defineProperty(prototype, name, {
    configurable: true,
    writable: false,
    enumerable: false,
    value: function afterPendingBind(...args) {
      const attempt = (retriesLeft) => {
        let result;
        try {
          result = original.apply(this, args);
        } catch (error) {
          if (!isBusy(error) || retriesLeft === 0) throw error;
          return later().then(() => attempt(retriesLeft - 1));
        }
        return result.catch((error) => {
          if (!isBusy(error) || retriesLeft === 0) throw error;
          return later().then(() => attempt(retriesLeft - 1));
        });
      };
      return attempt(RETRIES);
    },
  });
}
