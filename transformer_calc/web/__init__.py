"""`tcalc web`: a local web page on the Python API (the `[web]` extra: Starlette, Jinja2, uvicorn).

app.py: the pages (one per command) and the server; forms.py: a page's form, URL and command
line, read from the command's request model; charts.py: the charts as inline SVG, drawn from
the typed result. Imported only by `tcalc web` (the plain CLI never loads these dependencies).
"""
