"""`mv ui`: a local web page of the pipeline (server.py serves page.html and the JSON it polls, panel.py)."""
