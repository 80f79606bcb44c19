"""What each fleet table shows, for both front ends (no Textual, no Rich).

One module per resource holds its ``COLUMNS`` (:class:`~byconsole.render.columns.ColumnSpec`)
and a ``fields(view, now)`` that turns one view into a typed row of display strings, already
made safe. The console's views (``byconsole.tui.views``) diff, sort, filter, mark and paint
those rows; the headless tables (``byconsole.headless.plain_table``) lay them out. Neither
defines a column: adding one is an edit here, and both front ends show it.
"""
