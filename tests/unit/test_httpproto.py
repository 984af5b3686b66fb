"""serve's protocol writes an answer's head and body in one write."""

from __future__ import annotations

from queenadmin.httpproto import _JOIN_BELOW, _OneWriteTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def test_head_and_body_go_out_together():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    transport.write(HEAD)
    assert raw.writes == []
    transport.write(b"{}")
    assert raw.writes == [HEAD + b"{}"]
    # The next answer on the same connection too.
    transport.next_answer()
    transport.write(HEAD)
    transport.write(b"[]")
    assert raw.writes == [HEAD + b"{}", HEAD + b"[]"]


def test_a_head_answer_without_body_goes_out_when_complete():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.next_answer()
    assert raw.writes == [HEAD]


def test_close_sends_a_held_head_first():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.close()
    assert raw.writes == [HEAD]
    assert raw.closed


def test_interim_answers_and_later_chunks_are_not_held():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert raw.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    transport.write(HEAD)
    transport.write(b"a")
    # A later chunk of the same answer, even one that looks like a head.
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert raw.writes[1:] == [HEAD + b"a", b"HTTP/1.1 200 OK\r\n\r\n"]


def test_a_large_body_follows_its_head():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    body = b"x" * _JOIN_BELOW
    transport.write(HEAD)
    transport.write(body)
    assert raw.writes == [HEAD, body]


def test_other_attributes_are_the_transports():
    raw = RecordingTransport()
    transport = _OneWriteTransport(raw)  # type: ignore[arg-type]
    assert transport.is_closing() is False
