"""`env_var()` for YAML values and CDC queries; secrets are the values it returns."""

from __future__ import annotations

import os

from feedctl.project.templates import Sandbox

REDACTED = "****"
_MISSING = object()


class EnvVarUnset(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


# Every value env_var() returned in this process: secrets to scrub from anything printed or written.
SECRET_VALUES: set[str] = set()


def env_var(name: str, default=_MISSING) -> str:
    value = os.environ.get(name)
    if value is not None:
        SECRET_VALUES.add(value)
        return value
    if default is _MISSING:
        raise EnvVarUnset(name)
    return default


def redacted_env_var(name: str, default=_MISSING) -> str:
    return REDACTED


def is_template(text) -> bool:
    return isinstance(text, str) and ("{{" in text or "{%" in text)


_yaml_env = Sandbox()  # no loader: a YAML value includes nothing


def render_value(text: str, redact: bool = False) -> str:
    """Render one YAML string value; only `env_var()` is available there."""
    return _yaml_env.render(_yaml_env.from_string(text), env_var=redacted_env_var if redact else env_var)
