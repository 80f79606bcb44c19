"""The scriptable front end: ``byconsole --snapshot`` and the admin subcommands.

Nothing here imports Textual, and ``--format json`` imports no Rich either (tests
enforce both): CI jobs and scripts pay only for what they print.
"""
