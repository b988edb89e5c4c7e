"""Cross-cutting plumbing shared by every app: roles, HTTP helpers, the one domain error,
strict JSON and the API's base pieces. It imports no domain app (evals, judges, labeling,
interop, apitokens); they import it."""
