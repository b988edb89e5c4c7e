"""API of labeling: calibration sets and figures, the export, labels. Who sees what mirrors
the pages: figures and the export for engineers and leads (a reviewer gets
``calibration: null`` with the reason), a reviewer's own labels only.
"""
