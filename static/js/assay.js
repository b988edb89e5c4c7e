// Assay's small behaviours. No inline script anywhere (CSP forbids it).
