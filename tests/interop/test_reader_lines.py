"""interop.importers.reader.text_lines: plain LF lines (read without the normalising pass)
and every other line ending number and read the same."""

from interop.importers.reader import text_lines


def test_it_numbers_lf_crlf_and_lone_cr_lines_alike():
    pieces = [
        b"\xef\xbb\xbfone\n",
        b"two\n",
        b"",
        b"three\r\n",
        b"four\rfive\n",
        b"\n",
        b"caf\xc3\xa9\n",
        b"last",
    ]
    assert list(text_lines(pieces)) == [
        (1, "one\n"),
        (2, "two\n"),
        (3, "three\n"),
        (4, "four\n"),
        (5, "five\n"),
        (6, "\n"),
        (7, "café\n"),
        (8, "last"),
    ]
