"""Developer tools that are not part of the ltx2k package: evaluations run from a checkout."""
