"""What the suite runs, as data: shapes, variants, cases, the eager references, metric
names, and the shape recorder that feeds new shapes in."""
