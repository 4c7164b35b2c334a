"""The other doors onto the Python API: `tcalc web` (a local web page) and `tcalc mcp` (an MCP
server for agents). Their options are declared here as every command's are; neither prices
anything itself: both call `transformer_calc.api` and show its typed results."""

from __future__ import annotations

from typing import Annotated, Any

from transformer_calc.requests.base import Request, opt

LOCALHOST = "127.0.0.1"  # both doors bind to the loopback interface unless told otherwise
WEB_PORT = 8000
MAX_PORT = 65535


def tcp_port(text: Any) -> int:
    """A TCP port: 1-65535, or 0 for a free one the system picks."""
    from transformer_calc.model.config import parse_whole

    value = parse_whole(text, low=0)
    if value > MAX_PORT:
        raise ValueError(f"{value} is not a TCP port; use 1-{MAX_PORT}, or 0 for a free one")
    return value


def interface(text: Any) -> str:
    """An interface to bind: a name or an address, no spaces."""
    if not isinstance(text, str) or not text.strip() or any(ch.isspace() for ch in text.strip()):
        raise ValueError("expected an interface name or address, e.g. 127.0.0.1")
    return text.strip()


class WebRequest(Request):
    """`tcalc web`: serve the pages on one interface and port."""

    command = "web"
    host: Annotated[str, opt("--host", help="Interface to bind; anything but 127.0.0.1/localhost serves the pages (and the "
                             "local files a MODEL path names) to the network, without authentication \\[default: "
                             "127.0.0.1].", parse=interface, job=False, api=False)] = LOCALHOST
    port: Annotated[int, opt("--port", help="TCP port; 0: a free one, printed at start \\[default: 8000].", parse=tcp_port,
                             job=False, api=False)] = WEB_PORT


class McpRequest(Request):
    """`tcalc mcp`: an MCP server on standard input and output (the stdio transport): no port."""

    command = "mcp"
