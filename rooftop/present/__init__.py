"""What a user reads: `report` (the report as one JSON document), `render` (its text), `diff_report`
(`rooftop diff` in words), `columns` (every published column, declared once), `format` (numbers
with units; unknown is a dash), `text` and `apart` (trace text made printable, names cut without
losing what tells them apart), `hints` (what would fill an empty column), `perfetto` (the export),
`summary` (the report document stored in a trace's footer, read back without pandas), and
`overview` (what the Overview shows, one shape from a stored summary or an analysis)."""
