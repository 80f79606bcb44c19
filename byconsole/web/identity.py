"""Who a console process serves, when ``byconsole serve`` started it for a browser.

The serve process authenticates the web user, then starts that session's console with
these variables set; the console names the user in the audit entries it writes and in
its read-only notice. Anyone starting ``byconsole`` by hand can set them too, as they
can set ``$USER``: the audit entry's Redis ACL user is the authenticated part.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

WEB_USER_ENV = "BYCONSOLE_WEB_USER"
WEB_ROLE_ENV = "BYCONSOLE_WEB_ROLE"


def web_user(env: Mapping[str, str] | None = None) -> str:
    """The web user this console process serves ('' outside ``byconsole serve``)."""
    env = os.environ if env is None else env
    return env.get(WEB_USER_ENV, "")[:64]


def web_role(env: Mapping[str, str] | None = None) -> str:
    """The web user's role ('' outside ``byconsole serve``)."""
    env = os.environ if env is None else env
    return env.get(WEB_ROLE_ENV, "")[:16]
