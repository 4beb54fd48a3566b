"""The report in a real headless Chromium: it renders, its script runs, its pixels are not blank."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest
from test_report import synthetic_report_data

from tasks.report.render import render_report, write_report

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1366, 2400
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's chromium; in CI its absence is a failure, elsewhere a skip that says why."""
    found = CHROMIUM if CHROMIUM.is_file() else None
    if found is None and (which := shutil.which("chromium")):
        found = Path(which)
    if found is None:
        message = f"{CHROMIUM} is missing: run .ci/install-chromium (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}")
        pytest.skip(message)
    return found


def _run(chromium: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


# ---------------------------------------------------------------- a small PNG decoder


def _swar_add(a: int, b: int, low7: int, high1: int) -> int:
    """Byte-wise (mod 256) addition of two rows packed as big integers, with no carries."""
    return ((a & low7) + (b & low7)) ^ ((a ^ b) & high1)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, RGB rows) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert header is not None, "PNG without IHDR"
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    assert len(raw) == height * (stride + 1), "truncated image data"
    low7 = int.from_bytes(b"\x7f" * stride, "big")
    high1 = int.from_bytes(b"\x80" * stride, "big")
    prev, rows, at = bytes(stride), [], 0
    for _ in range(height):
        kind, line = raw[at], raw[at + 1 : at + 1 + stride]
        at += 1 + stride
        if kind == 0:
            out = line
        elif kind == 2:  # Up: one carry-free addition of the whole row
            total = _swar_add(int.from_bytes(line, "big"), int.from_bytes(prev, "big"), low7, high1)
            out = total.to_bytes(stride, "big")
        elif kind == 1:  # Sub: a prefix sum per channel, by doubling shifts
            acc, shift = int.from_bytes(line, "big"), bpp * 8
            while shift < stride * 8:
                acc = _swar_add(acc, acc >> shift, low7, high1)
                shift *= 2
            out = acc.to_bytes(stride, "big")
        elif kind == 3:  # Average: byte by byte
            cur = bytearray(line)
            for x in range(stride):
                a = cur[x - bpp] if x >= bpp else 0
                cur[x] = (cur[x] + ((a + prev[x]) >> 1)) & 255
            out = bytes(cur)
        else:  # Paeth: byte by byte, the hot loop (libpng's form of the predictor)
            cur = bytearray(line)
            for x in range(min(bpp, stride)):
                cur[x] = (cur[x] + prev[x]) & 255
            for x in range(bpp, stride):
                a, b, c = cur[x - bpp], prev[x], prev[x - bpp]
                if b == c:  # flat above: the predictor is the left neighbour
                    cur[x] = (cur[x] + a) & 255
                    continue
                pa, pb = b - c, a - c
                pc = pa + pb
                pa, pb, pc = (pa if pa >= 0 else -pa), (pb if pb >= 0 else -pb), abs(pc)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (cur[x] + pred) & 255
            out = bytes(cur)
        rows.append(out)
        prev = out
    if bpp == 4:
        rows = [bytes(b for i, b in enumerate(r) if i % 4 != 3) for r in rows]
    return width, height, rows


def _hue(rgb: tuple[int, int, int]) -> str | None:
    """Which chart colour family a saturated pixel belongs to, if any."""
    r, g, b = rgb
    if max(rgb) - min(rgb) < 110:
        return None
    if r > 180 and b < 80:
        return "orange"
    if b > 150 and r < 60:
        return "blue"
    if g > 130 and r < 60 and b < 150:
        return "green"
    return None


def test_png_decoder_round_trip(tmp_path: Path) -> None:
    # Encode a known image with every filter type, then decode it back.
    width, height = 7, 5
    pixels = [bytes((x * 37 + y * 11) % 256 for x in range(width * 3)) for y in range(height)]
    raw = b""
    prev = bytes(width * 3)
    for y, row in enumerate(pixels):
        kind = y % 5
        out = bytearray()
        for x in range(width * 3):
            a = row[x - 3] if x >= 3 else 0
            b, c = prev[x], (prev[x - 3] if x >= 3 else 0)
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            paeth = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            pred = [0, a, b, (a + b) >> 1, paeth][kind]
            out.append((row[x] - pred) & 255)
        raw += bytes([kind]) + bytes(out)
        prev = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    assert decode_png(png) == (width, height, pixels)


# ---------------------------------------------------------------- the report in a browser


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(synthetic_report_data(), tmp_path_factory.mktemp("report") / "report.html")


def test_dom_after_scripts(chromium: Path, report_file: Path, tmp_path: Path) -> None:
    dom = _run(chromium, tmp_path / "profile", "--dump-dom", report_file.as_uri()).stdout
    assert dom.count("<svg") == 11
    assert dom.count('class="envelope"') == 6
    assert len(re.findall(r"<circle\b", dom)) > 100
    # the sorting script ran: it marks every table and makes headers focusable
    assert dom.count('data-sortable="ready"') == 6
    assert dom.count('aria-sort="none"') > 40
    assert 'tabindex="0"' in dom
    body = re.search(r'<table class="sortable" id="t-disclosure".*?<tbody>(.*?)</tbody>', dom, re.S)
    assert body and body.group(1).count("<tr>") == 6


def test_clicking_a_header_sorts_the_table(
    chromium: Path, report_file: Path, tmp_path: Path
) -> None:
    # Click the `consistency` header twice (descending) from a script appended to a copy of
    # the report, and read the resulting row order back from the DOM.
    probe = """<script>
    var table = document.getElementById('t-disclosure');
    var heads = table.tHead.rows[table.tHead.rows.length - 1].cells;
    var th = Array.prototype.filter.call(heads, function(h){
        return h.textContent.trim() === 'consistency'; })[0];
    th.click(); th.click();
    var order = Array.prototype.map.call(table.tBodies[0].rows, function(r){
        return r.cells[0].textContent + '/' + r.cells[1].textContent; });
    document.body.setAttribute('data-order', order.join(','));
    document.body.setAttribute('data-sorted', th.getAttribute('aria-sort'));
    </script>"""
    html = report_file.read_text("utf-8").replace("</body>", probe + "</body>")
    page = tmp_path / "probe.html"
    page.write_text(html, "utf-8")
    dom = _run(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    order = re.search(r'data-order="([^"]*)"', dom)
    assert order, "probe script did not run"
    data = synthetic_report_data().disclosure.sort_values("consistency", ascending=False)
    expected = ",".join(f"{j}/{c}" for j, c in zip(data["judge"], data["config"], strict=True))
    assert order.group(1) == expected
    assert 'data-sorted="descending"' in dom


def test_screenshot_is_not_blank(chromium: Path, report_file: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _run(
        chromium,
        tmp_path / "profile",
        f"--screenshot={shot}",
        f"--window-size={WIDTH},{HEIGHT}",
        report_file.as_uri(),
    )
    width, height, rows = decode_png(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    colours: Counter[tuple[int, int, int]] = Counter()
    lower: set[tuple[int, int, int]] = set()
    hues: Counter[str] = Counter()
    for y in range(0, height, 3):
        row = rows[y]
        pixels = list(zip(row[0::3], row[1::3], row[2::3], strict=True))
        colours.update(pixels)
        if y >= height // 2:
            lower.update(pixels)
        hues.update(h for h in map(_hue, pixels) if h)
    total = sum(colours.values())
    background, count = colours.most_common(1)[0]
    assert count / total < 0.9, f"page is {count / total:.0%} {background}: blank?"
    assert len(colours) > 300, f"only {len(colours)} distinct colours"
    assert len(lower) > 100, "nothing rendered below the fold"
    # the charts' palette (orange, blue, green marks) was painted, not only grey text
    for family in ("orange", "blue", "green"):
        assert hues[family] > 50, f"no {family} chart marks in the screenshot: {dict(hues)}"


def test_blank_page_fails_the_pixel_check(chromium: Path, tmp_path: Path) -> None:
    # The checks above must be able to fail: an empty page has one colour.
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><body></body></html>", "utf-8")
    shot = tmp_path / "blank.png"
    _run(chromium, tmp_path / "p", f"--screenshot={shot}", "--window-size=400,300", page.as_uri())
    _, _, rows = decode_png(shot.read_bytes())
    colours = {px for r in rows for px in zip(r[0::3], r[1::3], r[2::3], strict=True)}
    assert len(colours) == 1


def test_report_renders_identically_from_disk(report_file: Path) -> None:
    assert report_file.read_text("utf-8") == render_report(synthetic_report_data())
