"""The edges that draw: plotly figures (functions returning go.Figure) and HTML pages."""
