"""A fastdatatable DataTable that paints plain cells without Rich's layout machinery.

The library renders every body cell as `Styled(Padding(Align(value)))` through
`Console.render_lines`, so a page of 37 rows x 9 columns took longer than a key may, and a
`pagedown` in a million-row table with it (bench/RESULTS.md has the keys' figures). Nearly every
cell rooftop shows is one line of single-width text (a name, a number, the null sign), whose
rendering is three to five segments of one style: a space, the value (cut with `…`, or aligned
with spaces), a space.
`PlainCellTable` builds those segments directly, identical to the library's (checked segment by
segment in tests/test_tui_table_backend.py), and hands anything else (wide or combining
characters, control characters, markup, Rich renderables, headers, row labels, fixed cells) to the
library's own `_render_cell`.

`_render_cell`, `_cell_render_cache`, `_get_styles_to_render_cell`, `_update_count`,
`_pseudo_class_state`, `_show_hover_cursor`, `_line_cache`, `_row_render_cache`, `_get_row_style`,
`_labelled_row_exists`, `_row_label_column_width` and `_total_row_height` are textual-fastdatatable's
private names (0.19.x), used here as its own `_render_line` and `_render_cell` use them; `show_view` sets `_column_labels`,
`_ordered_columns` and `_require_update_dimensions` and computes the scrollable size as its
`_update_dimensions` does (its `sort` and `add_rows` call it); it sets Textual's `virtual_size`
without its layout pass and updates the scrollbars as a layout pass would, and body lines are
cropped with Textual's own `line_crop` (both private to Textual: `tui/textual_private.py`). Without
this class the table is only slower.
"""
from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.strip import Strip
from textual_fastdatatable import DataTable
from textual_fastdatatable.column import CELL_X_PADDING

from rooftop import speedups

from tui.textual_private import line_crop, update_scrollbars

ELLIPSIS = "…"


def _single_width(text: str) -> bool:
    """Every character takes one terminal cell and none is a control character (printable ASCII, or
    such as `…`, `—`, `µ`; not a wide or combining character)."""
    if not text.isprintable():
        return False
    return text.isascii() or _narrow(text)


@lru_cache(maxsize=4096)
def _narrow(text: str) -> bool:
    # per character, so remembered: the null sign and names cut with `…` recur on every page
    return all(ch.isascii() or get_character_cell_size(ch) == 1 for ch in text)


def plain_value(datum: object, null_rep: Text) -> tuple[str, str] | None:
    """(text, alignment) a cell shows for `datum`, as the library's `cell_formatter` would lay it
    out, when the fast path can paint it; None when it cannot (the library renders it)."""
    if datum is None:
        if null_rep.spans or null_rep.style or not _single_width(null_rep.plain):
            return None
        return null_rep.plain, "center"
    if isinstance(datum, bool):  # an int, but drawn as a styled tick
        return None
    if isinstance(datum, str):
        # With markup off the library escapes `[`, which then prints as itself; it escapes a final
        # `\\` too, but cuts the value one cell early then: that odd case stays the library's.
        return (datum, "left") if _single_width(datum) and not datum.endswith("\\") else None
    if isinstance(datum, (int, float, Decimal)):
        text = f"{datum:n}"  # the library's `display_text`, locale included
        return (text, "right") if _single_width(text) else None
    return None


def plain_text(text: str, align: str, inner: int) -> str:
    """One cell line as one string: `plain_segments`' texts joined (what they are once simplified,
    sharing one style)."""
    n = len(text)
    if n > inner:
        return " " + text[: inner - 1] + ELLIPSIS + " "
    fill = inner - n
    if align == "left":
        return " " + text + " " * fill + " "
    if align == "right":
        return " " + " " * fill + text + " "
    left = fill // 2
    return " " + " " * left + text + " " * (fill - left) + " "


def plain_segments(text: str, align: str, inner: int, style: Style) -> list[Segment]:
    """One cell line: a space, `text` in `inner` cells (cut to `head…` when longer, else padded to
    `align`), a space; segments split as Rich splits them."""
    pad = Segment(" ", style)
    n = len(text)
    if n > inner:
        return [pad, Segment(text[: inner - 1] + ELLIPSIS, style), pad]
    fill = inner - n
    if align == "left":
        return [pad, Segment(text, style), Segment(" " * fill, style), pad] if fill else [pad, Segment(text, style), pad]
    if align == "right":
        if not text:
            return [pad, Segment(" " * fill, style), pad]
        return [pad, Segment(" " * fill, style), Segment(text, style), pad] if fill else [pad, Segment(text, style), pad]
    left = fill // 2
    out = [pad]
    if left:
        out.append(Segment(" " * left, style))
    out.append(Segment(text, style))
    if fill - left:
        out.append(Segment(" " * (fill - left), style))
    out.append(pad)
    return out


class PlainCellTable(DataTable):
    """The library's DataTable, its body cells of plain text painted directly (see the module)."""

    def __init__(self, *args, **kwargs) -> None:
        self._plain_styles: dict[tuple, Style] = {}  # before the library's __init__, which clears caches
        self._row_styles: dict[tuple, tuple[Style, Style]] = {}
        self._cell_styles: dict[tuple, Style] = {}  # (style without meta, row, column) -> with its meta
        self._paint_style: Style | None = None  # the widget's style during `render_lines`
        self._painter = speedups.on("PLAIN_CELLS")  # off: every cell is the library's (rooftop/speedups.py)
        super().__init__(*args, **kwargs)

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._plain_styles.clear()
        self._row_styles.clear()
        # (`_cell_styles` stays: keyed by the style itself, it never goes stale; a sort or a new
        # page at the same place finds its cells' styles there)

    def show_view(self, backend, column_labels: list[str]) -> None:
        """Show another view of the same columns (a sort, a filter) in this widget, as the library's
        own `sort` does in place with its Arrow backend: a new backend, the header relabelled, the
        widths and the scrollable size measured again, a new update count so that no cached row is
        reused. Removing the table and mounting a new one costs about four full repaints of a
        million-row page (removal, mount, focus, cursor)."""
        backend.render_markup = self.render_markup
        self.backend = backend
        self._column_labels = list(column_labels)
        self._ordered_columns = None
        self._update_count += 1
        self._clear_caches()
        self._require_update_dimensions = False
        self._update_dimensions_in_place()
        self.refresh()

    def _update_dimensions_in_place(self) -> None:
        """`_update_dimensions([])` (the scrollable size from the new widths) without the layout pass
        that setting `virtual_size` asks for. A sort's arrow widens or narrows a column's header
        (`step ▼`), so the scrollable width changes on most sorts; a layout pass then restyles and
        repaints the whole screen (on top of the table's own repaint).
        Its only effect on this widget, whose own size is set by its container, is what
        `ScrollView._size_updated` does with an unchanged size: `_scroll_update` (the scrollbars'
        sizes, the scroll offsets clamped). That is done here; a layout pass is still asked for
        when a scrollbar appears or goes (the table's inner size changes) or when the widget's
        own size follows its content (`height: auto`, the library's default; rooftop's are `1fr`)."""
        columns_width = sum(column.render_width for column in self.ordered_columns)  # as the library sums them
        header_height = self.header_height if self.show_header else 0
        size = Size(columns_width + self._row_label_column_width, self._total_row_height + header_height)
        if size == self.virtual_size:
            return
        if self.styles.auto_dimensions:  # its own size follows its content (the library's `height: auto`)
            self.virtual_size = size
            return
        scrollbars = (self.show_horizontal_scrollbar, self.show_vertical_scrollbar)
        self.set_reactive(DataTable.virtual_size, size)
        update_scrollbars(self, size)
        if (self.show_horizontal_scrollbar, self.show_vertical_scrollbar) != scrollbars:
            self.refresh(layout=True)

    def _body_row_styles(self, row_index: int, base_style: Style) -> tuple[Style, Style]:
        """(row style, style of the fill right of the last column) of a body row, as the library
        computes them for every line (two walks up the DOM and a colour blend).
        They change with the CSS and the table's pseudo-classes, which the key holds, as the
        library's own row cache does."""
        look = (row_index % 2 if self.zebra_stripes else base_style, self._update_count, self._pseudo_class_state)
        styles = self._row_styles.get(look)
        if styles is None:
            row_style = self._get_row_style(row_index, base_style)
            faded = Color.from_rich_color(row_style.bgcolor).blend(self.background_colors[1], factor=0.25)
            styles = (row_style, Style.from_color(color=row_style.color, bgcolor=faded.rich_color))
            if len(self._row_styles) > 16:
                self._row_styles.clear()
            self._row_styles[look] = styles
        return styles

    def _cell_state(self) -> tuple:
        """What a plain cell's look depends on besides its value and row style, read once per line
        (most are reactives: a few µs a read, which per cell cost more than painting it)."""
        return (self.show_cursor, self._show_hover_cursor, self.cursor_type, self.cursor_foreground_priority,
                self.cursor_background_priority, self._update_count, self._pseudo_class_state)

    def _plain_ok(self) -> bool:
        """Whether cells of this table are one line cut with `…` and never markup (the fast path)."""
        return self._painter and self.max_column_content_width is not None and not self.render_markup

    def _plain_row(self, row_index: int) -> bool:
        """Whether body row `row_index` takes the fast paths: no row labels, no fixed columns, a row
        cursor or none, plain cells (`_plain_ok`); anything else is the library's."""
        return not ((self._labelled_row_exists and self.show_row_labels) or self.fixed_columns
                    or self.cursor_type not in ("row", "none") or row_index < self.fixed_rows
                    or not self.is_valid_row_index(row_index) or not self._plain_ok())

    def _visible_columns(self, x1: int) -> tuple[list[int], int, int, int]:
        """(each column's width, first and last column (inclusive) a line scrolled to `x1` shows,
        the width of the columns left of the first), found as the library finds them."""
        col_widths = [col.render_width for col in self.ordered_columns]
        cumulative_width = hidden_width = 0
        visible_width = self.size.width
        col1, col2 = 0, None
        for i, w in enumerate(col_widths):
            if cumulative_width < x1:
                col1 = i
                hidden_width = cumulative_width
            if col2 is None and cumulative_width - x1 > visible_width:
                col2 = i
                break
            cumulative_width += w
        else:
            col2 = len(col_widths) - 1
        return col_widths, col1, col2, hidden_width

    def render_lines(self, crop):
        # The widget's style, which the library reads for every line (a walk up the DOM and a
        # colour blend), is read once per paint: nothing restyles during one.
        if not self._painter:
            return super().render_lines(crop)
        self._paint_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None

    def render_line(self, y: int) -> Strip:
        if self._paint_style is None:
            return super().render_line(y)
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y >= self.fixed_rows + (self.header_height if self.show_header else 0):  # as the library's
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + width, self._paint_style)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """A body line as the library's `_render_line` makes it (the same Strip once simplified:
        checked in tests/test_tui_table_backend.py and test_tui_sort_cache.py), built as one
        segment per plain cell, the form the library's segments take after `simplify`: a space,
        the text, its padding and a space share one style. The library builds every cell from three
        to five segments through two caches, then joins, crops and simplifies them: a new page
        costs about a third less this way (and the whole widget's paint less again, with the style
        read once per paint)."""
        row_index = y - 1
        if row_index < 0 or not self._plain_row(row_index):
            return super()._render_line(y, x1, x2, base_style)
        width = self.size.width
        cursor_type = self.cursor_type
        row = cursor_type == "row"  # `_should_highlight` for a row cursor: the whole row; never a range
        cursor = row and self.cursor_coordinate.row == row_index
        hover = row and self.hover_coordinate.row == row_index
        # Keyed by whether the cursor (hover) is on this line, not by where it is (the library's
        # key): a `down` repaints the two lines it changes, not every line on screen.
        cache_key = ("plain", y, x1, x2, width, cursor, hover, base_style, cursor_type, self._show_hover_cursor,
                     self._update_count, self._pseudo_class_state)
        strip = self._line_cache.get(cache_key)
        if strip is not None:
            return strip
        col_widths, col1, col2, hidden_width = self._visible_columns(x1)
        state = self._cell_state()
        row_style, faded_style = self._body_row_styles(row_index, base_style)
        plain_style = self._plain_style(row_style, cursor, hover, False, state)
        cell_styles = self._cell_styles
        null_rep = self.null_rep
        values = self.backend.get_row_at(row_index)
        segments: list[Segment] = []
        for i in range(col1, col2 + 1):
            w = col_widths[i]
            shown = plain_value(values[i], null_rep) if w - CELL_X_PADDING >= 2 else None
            if shown is None:  # the library's cell (wide characters, markup, a bool)
                segments.extend(DataTable._render_cell(self, row_index, i, row_style, w, cursor, hover, False)[0])
                continue
            look = (plain_style, row_index, i)
            style = cell_styles.get(look)
            if style is None:
                # a page's cells keep their (row, column) through a sort or a scroll back: each
                # style with its meta is made once, not per paint (`from_meta` pickles the meta)
                if len(cell_styles) > 4096:
                    cell_styles.clear()
                style = cell_styles[look] = plain_style + Style.from_meta({"row": row_index, "column": i})
            segments.append(Segment(plain_text(shown[0], shown[1], w - CELL_X_PADDING), style))
        remaining_space = max(0, width - sum(col_widths) - self._row_label_column_width)
        segments.append(Segment(" " * remaining_space, faded_style))
        strip = Strip(line_crop(segments, x1 - hidden_width, x2 - hidden_width, width)).adjust_cell_length(
            width, base_style).simplify()
        self._line_cache[cache_key] = strip
        return strip

    def _render_line_in_row(self, row_index: int, line_no: int, x1: int, x2: int, base_style: Style,
                            cursor_location: Coordinate, hover_location: Coordinate,
                            selection_anchor_location: Coordinate | None):
        """The library's body row (no row labels, no fixed columns, a row or no cursor), its styles
        looked up once per stripe instead of computed per line and its cells painted by
        `_plain_cell`; everything else goes to the library. (`_render_line` paints body lines
        itself; this serves the library's other callers.)"""
        cursor_type = self.cursor_type
        if not self._plain_row(row_index):
            return super()._render_line_in_row(row_index, line_no, x1, x2, base_style, cursor_location,
                                               hover_location, selection_anchor_location)
        show_cursor = self.show_cursor
        col_widths, col1, col2, hidden_width = self._visible_columns(x1)
        state = self._cell_state()
        cache_key = (row_index, line_no, col1, col2, base_style, cursor_location, hover_location,
                     selection_anchor_location, cursor_type, show_cursor, state[1], state[5], state[6])
        cached = self._row_render_cache.get(cache_key)
        if cached is not None:
            return cached[0], cached[1], hidden_width, 0
        row_style, faded_style = self._body_row_styles(row_index, base_style)
        # `_should_highlight` for a row cursor: the whole row; no cursor: nothing; never a range
        row = cursor_type == "row"
        cursor = row and cursor_location.row == row_index
        hover = row and hover_location.row == row_index
        scrollable_row = [self._plain_cell(state, row_index, i, row_style, col_widths[i], cursor, hover, False)[line_no]
                          for i in range(col1, col2 + 1)]
        remaining_space = max(0, self.size.width - sum(col_widths) - self._row_label_column_width)
        scrollable_row.append([Segment(" " * remaining_space, faded_style)])
        self._row_render_cache[cache_key] = ([], scrollable_row)
        return [], scrollable_row, hidden_width, 0

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False, in_range: bool = False):
        if row_index < self.fixed_rows or column_index < self.fixed_columns or not self._plain_ok():
            # header, row labels, fixed cells; or cells that wrap, or markup
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover, in_range)
        return self._plain_cell(self._cell_state(), row_index, column_index, base_style, width, cursor, hover, in_range)

    def _plain_style(self, base_style: Style, cursor: bool, hover: bool, in_range: bool, state: tuple) -> Style:
        """A plain cell's style without its meta. The library's style is ((base + meta) + component)
        + post. Only `meta` holds meta, and it sets nothing else, so (base + component + post) +
        meta is the same style: the sum without the meta is made once per row style and cursor
        state, not once per cell."""
        look = (base_style, cursor, hover, in_range, state)
        plain = self._plain_styles.get(look)
        if plain is None:
            show_cursor, show_hover, cursor_type, fg_priority, bg_priority, _, _ = state
            component_style, post_style = self._get_styles_to_render_cell(
                False, False, False, hover, cursor, in_range, show_cursor, show_hover,
                cursor_type == "range", fg_priority == "css", bg_priority == "css")
            plain = base_style + component_style
            if post_style:
                plain = plain + post_style
            if len(self._plain_styles) > 64:
                self._plain_styles.clear()
            self._plain_styles[look] = plain
        return plain

    def _plain_cell(self, state: tuple, row_index: int, column_index: int, base_style: Style, width: int,
                    cursor: bool, hover: bool, in_range: bool):
        """A body cell (`_plain_ok`), painted directly when its value is plain, else by the library.
        `state`: `_cell_state()`."""
        _, show_hover, _, _, _, update_count, pseudo = state
        key = (row_index, column_index, base_style, cursor, hover, in_range, show_hover, update_count, pseudo)
        cached = self._cell_render_cache.get(key)
        if cached is not None:
            return cached
        shown = plain_value(self.backend.get_cell_at(row_index, column_index), self.null_rep) \
            if width - CELL_X_PADDING >= 2 else None
        if shown is None:
            return DataTable._render_cell(self, row_index, column_index, base_style, width, cursor, hover, in_range)
        style = self._plain_style(base_style, cursor, hover, in_range, state) + \
            Style.from_meta({"row": row_index, "column": column_index})
        lines = [plain_segments(shown[0], shown[1], width - CELL_X_PADDING, style)]
        self._cell_render_cache[key] = lines
        return lines
