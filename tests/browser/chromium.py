"""Where the browser tests find Chromium, and how it is started: the system's own build
(Debian's `chromium`), driven by Playwright, which never downloads a browser here."""

from __future__ import annotations

import os
import shutil

MISSING = (
    "Chromium not found: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH"
)
# As root, with none of the background connections this machine's closed network refuses
# (`headless=True` adds --headless; Playwright gives each launch a fresh user-data-dir).
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DEFAULT_PATH = "/usr/bin/chromium"
NAMES = ("chromium", "chromium-browser", "google-chrome")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_chromium() -> str | None:
    """CHROMIUM_PATH when set (None if it is not an executable file), else /usr/bin/chromium,
    else the first of NAMES on PATH; None when there is none."""
    given = os.environ.get("CHROMIUM_PATH", "")
    if given:
        return given if _executable(given) else None
    if _executable(DEFAULT_PATH):
        return DEFAULT_PATH
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def required() -> bool:
    """Under CI a missing Chromium fails the browser tests instead of skipping them."""
    return bool(os.environ.get("CI"))
