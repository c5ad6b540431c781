"""What counts as a drawn figure: a non-empty PNG or SVG file."""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def is_png(path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG_MAGIC)


def is_svg(path) -> bool:
    text = path.read_text()
    return len(text) > 1000 and "<svg" in text[:2000] and text.rstrip().endswith("</svg>")
