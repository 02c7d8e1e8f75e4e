"""What a run writes down of its config, with the secrets a config may hold taken out.

    record = redacted(json.loads(dump_json(config)))   # config.json / config.toml, W&B's config

A config carries secrets in a few known places, and records of it land in files others may
read (the run directory on a shared filesystem) or upload (W&B). In the copy:

* every value of a `headers` table (an Authorization header, an API key) is "<redacted>";
* a value of `env_vars` (any table of that name) is "<redacted>" when its name looks secret
  (KEY, TOKEN, SECRET, PASSWORD, AUTH, CREDENTIAL, COOKIE, SESSION in any case) or the value
  does, under any name: a known token's prefix (`hf_`, `sk-`, `ghp_`, `xoxb-`, `AKIA`, ...)
  and 16 more characters, `Bearer ...`, or 24 or more letters and digits with no other
  character, at least one of each (a W&B key's 40 hex digits; base64's `+` and `=` count);
* a URL's password and query string (a heartbeat URL with `?token=...`) become "redacted";
* so does the path of a monitor's ping URL (`heartbeat.url`: https://hc-ping.com/<uuid> puts
  its secret there).

Settings that name a variable instead (`api_key_var`, `headers_from_env`) hold no secret and
stay: they are the way to keep one out of the config. The launch files the processes read
(rl-*.json, launch-config.json) keep the values, written for their owner alone
(atomic_files.py, `private`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
IN_URL = "redacted"  # a URL stays one
SECRET_NAME = re.compile(r"key|token|secret|passw|auth|credential|cookie|session", re.IGNORECASE)
SECRET_VALUE = re.compile(  # a known token's prefix, or one run of 24+ letters and digits
    r"(?:hf_|sk-|sk_|pk_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA|AIza|eyJ)"
    r"[A-Za-z0-9_\-.]{16,}"
    r"|Bearer\s+\S+"
    r"|(?=[A-Za-z+=]*\d)(?=[0-9+=]*[A-Za-z])[A-Za-z0-9+=]{24,}"
)


def redacted(document: Any) -> Any:
    """A copy of `document` (JSON data) with the secrets above replaced."""
    if isinstance(document, list):
        return [redacted(item) for item in document]
    if not isinstance(document, dict):
        return _url(document) if isinstance(document, str) else document
    out: dict[str, Any] = {}
    for key, value in document.items():
        if key == "headers" and isinstance(value, dict):
            out[key] = dict.fromkeys(value, REDACTED)
        elif key == "heartbeat" and isinstance(value, dict) and isinstance(value.get("url"), str):
            out[key] = redacted(value) | {"url": _url(value["url"], path=True)}
        elif key == "env_vars" and isinstance(value, dict):
            out[key] = {name: REDACTED if _secret(name, v) else _url(v)
                        for name, v in value.items()}  # fmt: skip
        else:
            out[key] = redacted(value)
    return out


def _secret(name: str, value: Any) -> bool:
    """Whether an env var's name or value looks like a secret's."""
    return bool(SECRET_NAME.search(name)) or (
        isinstance(value, str) and SECRET_VALUE.fullmatch(value.strip()) is not None
    )


def _url(value: Any, *, path: bool = False) -> Any:
    """A URL with its password and query (and with `path`, its path) replaced; anything else
    as it is."""
    if not isinstance(value, str) or "://" not in value:
        return value
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return value
    netloc = parts.netloc
    if password is not None:
        netloc = netloc.replace(f":{password}@", f":{IN_URL}@", 1)
    query = IN_URL if parts.query else ""
    shown = f"/{IN_URL}" if path and parts.path.strip("/") else parts.path
    return urlunsplit((parts.scheme, netloc, shown, query, parts.fragment))
