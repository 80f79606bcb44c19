// byconsole serve: show in the page why a console session ended. The server closes the
// websocket with a reason (the console process died, the session was idle, the login
// ended, the server is stopping); textual.js only marks the page closed.
(function () {
  "use strict";
  const Native = window.WebSocket;
  class ReportingWebSocket extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      this.addEventListener("close", function (event) {
        const ended = document.getElementById("ended");
        if (ended) {
          ended.textContent = event.reason
            ? "Session ended: " + event.reason
            : "Session ended (the connection closed).";
        }
      });
    }
  }
  window.WebSocket = ReportingWebSocket;
})();
