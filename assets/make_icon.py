"""Draw assets/icon.png (512x512): a reward curve that climbs past a gate bar. Run: python assets/make_icon.py"""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw

SIZE = 512
SCALE = 4  # draw large, then downsample for smooth edges


def draw_icon(path: Path) -> None:
    """Write the plugin icon to `path`."""
    s = SIZE * SCALE
    img = Image.new("RGBA", (s, s), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([0, 0, s - 1, s - 1], radius=int(s * 0.18), fill=(22, 33, 62, 255))
    # the gate: a vertical bar with a check mark above it
    gx = int(s * 0.40)
    d.rounded_rectangle([gx - s // 60, int(s * 0.22), gx + s // 60, int(s * 0.80)], radius=s // 60,
                        fill=(255, 196, 61, 255))
    # axes
    w = s // 90
    d.line([(int(s * 0.14), int(s * 0.82)), (int(s * 0.88), int(s * 0.82))], fill=(140, 160, 200, 255), width=w)
    d.line([(int(s * 0.14), int(s * 0.18)), (int(s * 0.14), int(s * 0.82))], fill=(140, 160, 200, 255), width=w)
    # the reward curve: flat before the gate, rising after it
    pts = []
    for i in range(101):
        t = i / 100
        x = s * (0.16 + 0.70 * t)
        y = s * (0.74 - 0.46 / (1 + math.exp(-12 * (t - 0.55))))
        pts.append((x, y))
    d.line(pts, fill=(86, 214, 160, 255), width=s // 40, joint="curve")
    # a check mark at the top of the gate
    c = [(gx - s * 0.07, s * 0.16), (gx - s * 0.02, s * 0.21), (gx + s * 0.08, s * 0.10)]
    d.line(c, fill=(255, 196, 61, 255), width=s // 45, joint="curve")
    img.resize((SIZE, SIZE), Image.Resampling.LANCZOS).save(path, optimize=True)


if __name__ == "__main__":
    draw_icon(Path(__file__).with_name("icon.png"))
