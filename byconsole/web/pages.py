"""The two HTML pages ``byconsole serve`` writes itself: the login form and the console page.

Everything interpolated is escaped; no inline script or handler (the Content-Security-
Policy forbids them), no resource from another origin.
"""

from __future__ import annotations

from html import escape


def login_page(where: str, error: str = "") -> str:
    """The login form; ``error`` is shown above it (already worded for the user)."""
    shown = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>byconsole · log in</title>
<link rel="stylesheet" href="/web/login.css">
</head>
<body>
<main>
<form method="post" action="/login" autocomplete="on">
<h1>byconsole</h1>
<p class="where">{escape(where)}</p>
{shown}
<label for="user">User</label>
<input id="user" name="user" autocomplete="username" required autofocus maxlength="64">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required
 maxlength="1024">
<button type="submit">Log in</button>
</form>
</main>
</body>
</html>
"""


def console_page(where: str, user: str, role: str, websocket_url: str) -> str:
    """The page that runs textual-serve's terminal client against ``/ws``."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>byconsole · {escape(where)}</title>
<link rel="stylesheet" href="/static/css/xterm.css">
<link rel="stylesheet" href="/web/console.css">
<script src="/web/console.js"></script>
<script src="/static/js/textual.js"></script>
</head>
<body>
<header>
<span class="brand">byconsole</span>
<span class="where">{escape(where)}</span>
<span class="who" id="who">{escape(user)} ({escape(role)})</span>
<form method="post" action="/logout"><button type="submit">Log out</button></form>
</header>
<div class="dialog-container intro-dialog"><div class="intro">Starting the console…</div></div>
<div class="dialog-container closed-dialog">
<div class="intro"><p class="message" id="ended">Session ended.</p>
<a class="button" href="/">Start a new session</a></div>
</div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{escape(websocket_url)}"
 data-font-size="16"></div>
</body>
</html>
"""
