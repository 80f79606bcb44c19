"""``byconsole serve`` / ``byconsole exporter``: the console in a browser and the fleet's
Prometheus text over HTTP, behind a login (README "byconsole in a browser").

The console served is the terminal one, run once per browser session by Textual's web
driver; nothing here draws a second UI. Imports no Textual: the serve process only
relays bytes between the browser and each session's console process.
"""
