"""The soak's HTTP client reopens a kept-alive connection the server closed
while it sat idle (uvicorn closes one after 5 s), instead of writing into it
and counting the call as unanswered."""

from __future__ import annotations

import asyncio

from tests.pooler.load import Http

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_a_connection_the_server_closed_while_idle_is_reopened() -> None:
    async def scenario() -> list[int]:
        connections = 0

        async def answer_once_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.write(ANSWER)
            await writer.drain()
            writer.close()  # as an idle keep-alive timeout does

        server = await asyncio.start_server(answer_once_then_close, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = Http(f"http://127.0.0.1:{port}", {}, 5.0)
        try:
            first = await client.request("GET", "/health")
            await asyncio.sleep(0.2)  # the close reaches the idle client
            second = await client.request("GET", "/health")
        finally:
            client.close()
            server.close()
            await server.wait_closed()
        return [first.status_code, second.status_code, connections]

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(scenario()) == [200, 200, 2]
    finally:
        loop.close()
