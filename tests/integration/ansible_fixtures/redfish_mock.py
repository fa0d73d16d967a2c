"""A tiny Redfish BMC stand-in with real-BMC BIOS semantics, for tests.

sushy-tools applies BIOS writes at once; real BMCs keep them in the
Bios/Settings resource until the system resets. This server does the latter:

- PATCH .../Bios/Settings stores pending attributes (400 for unknown names);
- POST  .../Actions/ComputerSystem.Reset applies pending to current;
- GET   /mock/state (no auth) reports counters and both attribute sets.

Run: python redfish_mock.py --port N --cert C --key K [--user U --password P] [--address A]
"""
from __future__ import annotations

import argparse
import base64
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SYS = "/redfish/v1/Systems/System.Embedded.1"


class State:
    def __init__(self, manufacturer: str, cpu_vendor: str, attributes: dict):
        self.lock = threading.Lock()
        self.manufacturer = manufacturer
        self.cpu_vendor = cpu_vendor
        self.current = dict(attributes)
        self.pending: dict = {}
        self.counts = {"requests": 0, "patches": 0, "resets": 0}

    def snapshot(self) -> dict:
        with self.lock:
            return {"current": dict(self.current), "pending": dict(self.pending), **self.counts}


def make_handler(state: State, user: str, password: str):
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep pytest output clean
            pass

        def _send(self, code: int, body: dict | None = None):
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(code)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str):
            self._send(code, {"error": {"code": "Base.1.8.GeneralError", "message": message,
                                        "@Message.ExtendedInfo": [{"Message": message}]}})

        def _authorised(self) -> bool:
            path = self.path.rstrip("/")
            if path in ("/redfish/v1", "/redfish", "/mock/state"):
                return True  # service root is unauthenticated in Redfish
            if self.headers.get("Authorization") == expected:
                return True
            self._error(401, "authentication required")
            return False

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self):  # noqa: N802 (http.server API)
            if not self._authorised():
                return
            path = self.path.rstrip("/")
            if path == "/mock/state":
                return self._send(200, state.snapshot())
            with state.lock:
                state.counts["requests"] += 1
                resources = {
                    "/redfish/v1": {"@odata.id": "/redfish/v1/", "Id": "RootService", "RedfishVersion": "1.11.0",
                                    "Vendor": state.manufacturer.split()[0],
                                    "Systems": {"@odata.id": "/redfish/v1/Systems"}},
                    "/redfish/v1/Systems": {"@odata.id": "/redfish/v1/Systems", "Members@odata.count": 1,
                                            "Members": [{"@odata.id": SYS}]},
                    SYS: {"@odata.id": SYS, "Id": "System.Embedded.1", "Name": "System",
                          "Manufacturer": state.manufacturer, "Model": "Mock 2S", "PowerState": "On",
                          "Bios": {"@odata.id": f"{SYS}/Bios"},
                          "Processors": {"@odata.id": f"{SYS}/Processors"},
                          "ProcessorSummary": {"Count": 2},
                          "Status": {"State": "Enabled", "Health": "OK"},
                          "Actions": {"#ComputerSystem.Reset": {
                              "target": f"{SYS}/Actions/ComputerSystem.Reset",
                              "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "GracefulRestart",
                                                                    "ForceRestart", "GracefulShutdown"]}}},
                    f"{SYS}/Processors": {"Members@odata.count": 2, "Members": [
                        {"@odata.id": f"{SYS}/Processors/CPU.Socket.{i}"} for i in (1, 2)]},
                    f"{SYS}/Bios": {"@odata.id": f"{SYS}/Bios", "Id": "Bios", "Attributes": dict(state.current),
                                    "@Redfish.Settings": {"SettingsObject": {"@odata.id": f"{SYS}/Bios/Settings"}}},
                    # Dell-like: the settings object lists only the pending changes.
                    f"{SYS}/Bios/Settings": {"@odata.id": f"{SYS}/Bios/Settings", "Id": "Settings",
                                             "Attributes": dict(state.pending)},
                }
                for i in (1, 2):
                    resources[f"{SYS}/Processors/CPU.Socket.{i}"] = {
                        "@odata.id": f"{SYS}/Processors/CPU.Socket.{i}", "Id": f"CPU.Socket.{i}",
                        "Name": "CPU", "Manufacturer": state.cpu_vendor, "Model": "EPYC 7763",
                        "ProcessorType": "CPU", "TotalCores": 64, "TotalThreads": 128,
                        "Status": {"State": "Enabled", "Health": "OK"}}
            if path in resources:
                return self._send(200, resources[path])
            return self._error(404, f"no resource {path}")

        def do_PATCH(self):  # noqa: N802
            if not self._authorised():
                return
            path = self.path.rstrip("/")
            if path != f"{SYS}/Bios/Settings":
                return self._error(405, "PATCH not allowed here")
            attrs = self._body().get("Attributes", {})
            with state.lock:
                state.counts["requests"] += 1
                unknown = sorted(set(attrs) - set(state.current))
                if unknown:
                    return self._error(400, f"unknown attributes {unknown}")
                state.counts["patches"] += 1
                state.pending.update(attrs)
            return self._send(202, {"Accepted": True})

        def do_POST(self):  # noqa: N802
            if not self._authorised():
                return
            path = self.path.rstrip("/")
            if path != f"{SYS}/Actions/ComputerSystem.Reset":
                return self._error(404, f"no action {path}")
            reset = self._body().get("ResetType")
            with state.lock:
                state.counts["requests"] += 1
                state.counts["resets"] += 1
                # The BIOS applies pending settings while the system restarts.
                state.current.update(state.pending)
                state.pending.clear()
            return self._send(204 if reset else 400)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--address", default="127.0.0.1")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--user", default="root")
    ap.add_argument("--password", default="calvin")
    ap.add_argument("--manufacturer", default="Dell Inc.")
    ap.add_argument("--cpu-vendor", default="Advanced Micro Devices, Inc.")
    ap.add_argument("--attributes", default='{"LogicalProc": "Enabled", "NumaNodesPerSocket": "1", "ProcTurboMode": "Enabled"}')
    args = ap.parse_args()
    state = State(args.manufacturer, args.cpu_vendor, json.loads(args.attributes))
    server = ThreadingHTTPServer((args.address, args.port), make_handler(state, args.user, args.password))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"redfish mock on https://{args.address}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
