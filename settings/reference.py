"""The reference of every variable as docs/configuration.md holds it (`python -m settings` prints
it): one table per section (`SECTIONS`), each variable with its default, range and meaning."""

from __future__ import annotations

from settings import SECTIONS, VARIABLES, Settings, bounds, describe


def _shown_default(name: str) -> str:
    info = Settings.model_fields[name]
    default = info.default
    if default is None or default == []:
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, list):
        return ",".join(default)
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def markdown_reference() -> str:
    """The reference tables of every variable, as docs/configuration.md holds them."""
    lines: list[str] = []
    for name in VARIABLES:
        if name in SECTIONS:
            lines += [
                "",
                f"### {SECTIONS[name]}",
                "",
                "| variable | default | range | meaning |",
                "| --- | --- | --- | --- |",
            ]
        low, high = bounds(name)
        span = (
            ""
            if low is None and high is None
            else f"{'' if low is None else f'{low:g}'}..{'' if high is None else f'{high:g}'}"
        )
        text = describe(name).replace("|", "\\|")
        lines.append(f"| `{name}` | `{_shown_default(name)}` | {span} | {text} |")
    return "\n".join(lines).strip() + "\n"
