"""gRPC over TLS: a BMv2 that requires mutual TLS is programmed through the certificate paths of
the controller's configuration, and refuses a controller without them."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.app.config import ControllerConfig
from controller.app.runtime import build_southbound
from controller.intent import compute_intent
from controller.southbound import p4_program
from controller.southbound.grpc_settings import TlsConfig
from controller.southbound.interface import SwitchRole
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, find_tool
from testbed.bmv2 import Bmv2Options, bmv2_command, wait_for_port
from topologies import Topology, load_topology_text

pytestmark = [pytest.mark.bmv2]

SERVER_NAME = "mrc-switch"


def _skip_reason() -> str | None:
    if find_tool(SIMPLE_SWITCH_GRPC) is None:
        return "simple_switch_grpc not found (see `make doctor`)"
    if shutil.which("openssl") is None:
        return "openssl not found (makes the test certificates)"
    if not p4_program.P4BLOB_PATH.exists():
        return "p4src/build/mrc.json missing (run `make build`)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for SERVER_NAME and a client certificate, all signed by it."""
    _openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
        *("-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=mrc-test-ca"),
        cwd=directory,
    )
    for name, subject in (("server", SERVER_NAME), ("client", "mrc-controller")):
        _openssl(
            *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key"),
            *("-out", f"{name}.csr", "-subj", f"/CN={subject}"),
            cwd=directory,
        )
        (directory / f"{name}.ext").write_text(f"subjectAltName=DNS:{subject}\n")
        _openssl(
            *("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key"),
            *("-CAcreateserial", "-days", "1", "-out", f"{name}.pem"),
            *("-extfile", f"{name}.ext"),
            cwd=directory,
        )
    names = ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")
    return {name: directory / name for name in names}


@pytest.fixture(scope="module")
def tls_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Topology, Path]]:
    """One BMv2 that only speaks mutual TLS, and a one-switch topology naming its ports."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("tls")
    certs = _certificates(directory)
    grpc_port, thrift_port = _free_port(), _free_port()
    options = Bmv2Options(
        ports={}, device_id=1, grpc_port=grpc_port, thrift_port=thrift_port, log_dir=directory
    )
    command = [
        *bmv2_command(options),
        "--grpc-server-ssl",
        *("--grpc-server-cacert", str(certs["ca.pem"])),
        *("--grpc-server-cert", str(certs["server.pem"])),
        *("--grpc-server-key", str(certs["server.key"])),
        "--grpc-server-with-client-auth",
    ]
    with (directory / "bmv2.out").open("ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", grpc_port, 20.0)
            topology = load_topology_text(
                textwrap.dedent(
                    f"""\
                    name: tls
                    switches:
                      - {{name: l1, role: leaf, device_id: 1, grpc_port: {grpc_port},
                          thrift_port: {thrift_port}}}
                    hosts:
                      - {{name: h1, nics: [{{switch: l1, port: 1}}]}}
                    """
                ),
                source="tls",
            )
            yield topology, directory
        finally:
            process.kill()
            process.wait(10)


class Roles:
    def __init__(self) -> None:
        self.role: SwitchRole | None = None

    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        self.role = role

    def switch_disconnected(self, switch: str) -> None:
        self.role = None

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        pass


def _program_over(topology: Topology, config: ControllerConfig, wait_s: float):
    async def scenario():
        southbound = build_southbound(topology, config)
        roles = Roles()
        task = asyncio.create_task(southbound.run(roles))
        try:
            for _ in range(int(wait_s / 0.05)):
                if roles.role is SwitchRole.PRIMARY:
                    break
                await asyncio.sleep(0.05)
            else:
                return None
            return await southbound.program(compute_intent(topology).switch("l1"), read_back=True)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    return asyncio.run(scenario())


def test_a_switch_requiring_mutual_tls_is_programmed_with_the_configured_certificates(
    tls_switch,
):
    topology, directory = tls_switch
    config = ControllerConfig(
        queues=False,
        tls=TlsConfig(
            directory / "ca.pem", directory / "client.pem", directory / "client.key", SERVER_NAME
        ),
    )
    result = _program_over(topology, config, 30.0)
    assert result is not None, "no TLS channel came up"
    assert result.ok and result.writes > 0


def test_a_controller_without_tls_never_reaches_a_tls_only_switch(tls_switch):
    topology, _ = tls_switch
    assert _program_over(topology, ControllerConfig(queues=False), 3.0) is None
