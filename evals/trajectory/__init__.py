"""An agent trial's trajectory (its ordered steps) and final state, as data.

``evals.trajectory.steps`` owns the step shape: parsing from outside (refuse policy),
cleaning a pipeline's own steps (replace policy), and the totals a report shows.
"""
