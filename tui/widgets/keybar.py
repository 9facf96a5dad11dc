"""The key line at the bottom: this screen's keys first, then the app's, fitted to the width.

Textual's Footer drops whatever does not fit on the right (at 80 columns the app keys vanished) and
rebuilds one widget per key on every focus change (a large share of each screen switch). This is one
Static: the number keys collapse to `1-5,7 screens` (`1-7` when two traces are open, so Compare is
there), `? help` is always kept, and what does not fit is left out whole (the `?` help lists every key).
"""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

# Always shown, whatever the width: the way to every other key.
ALWAYS = ("help", "quit")
# Hidden by its binding (one trace has nothing to compare) but shown once the app holds two.
COMPARE_ID = "screen.compare"


def _shown(app, binding) -> bool:
    if binding.id == COMPARE_ID:
        return len(getattr(app, "analyses", ())) > 1
    return binding.show


def _digit_run(keys: list[str]) -> str | None:
    """`1-5` for consecutive digit keys, `1-5,7` with a gap (one trace: no Compare), else None."""
    if len(keys) < 2 or not all(len(k) == 1 and k.isdigit() for k in keys):
        return None
    nums = sorted(int(k) for k in keys)
    parts, start = [], nums[0]
    for prev, n in zip(nums, nums[1:] + [None]):
        if n != prev + 1:
            parts.append(f"{start}-{prev}" if prev - start > 1 else
                         f"{start},{prev}" if prev > start else f"{start}")
            start = n
    return ",".join(parts)


def key_items(screen) -> list[tuple[str, str, bool, str]]:
    """(keys as shown, description, enabled, action) for the shown bindings: screen's first, then the app's."""
    app = screen.app
    local: dict[str, tuple[list[str], str, bool]] = {}
    glob: dict[str, tuple[list[str], str, bool]] = {}
    for node, binding, enabled, _tooltip in screen.active_bindings.values():
        if not _shown(app, binding) or not binding.description:
            continue
        where = glob if node is app else local
        keys, desc, on = where.setdefault(binding.action, ([], binding.description, enabled))
        keys.append(app.get_key_display(binding))
    out = [(" ".join(dict.fromkeys(k)), d, e, a) for a, (k, d, e) in local.items()]
    screens = [(k[0], e) for a, (k, d, e) in glob.items() if a.startswith("show_screen")]
    run = _digit_run([k for k, _ in screens])
    for action, (keys, desc, on) in glob.items():
        if run and action.startswith("show_screen"):
            if keys[0] == screens[0][0]:
                out.append((run, "screens", True, "show_screen"))
            continue
        out.append((" ".join(dict.fromkeys(keys)), desc, on, action))
    return out


class KeyBar(Static):
    """One line of `key description` pairs for the current screen; rebuilt when bindings change."""

    COMPONENT_CLASSES = {"keybar--key", "keybar--disabled"}

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.refresh())

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        items = key_items(self.screen)
        width = self.size.width or 80
        always = [it for it in items if it[3] in ALWAYS]
        room = width - sum(len(k) + len(d) + 3 for k, d, _, _ in always)
        shown = []
        for it in items:
            if it in always:
                shown.append(it)
                continue
            need = len(it[0]) + len(it[1]) + 3
            if need <= room:
                shown.append(it)
                room -= need
        key_style = self.get_component_rich_style("keybar--key")
        off = self.get_component_rich_style("keybar--disabled")
        text = Text(no_wrap=True, overflow="crop", end="")
        for keys, desc, enabled, _ in shown:
            text.append(" ")
            text.append(keys, key_style if enabled else off)
            text.append(f" {desc} ", "" if enabled else off)
        return text
