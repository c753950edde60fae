"""Pictures and pages from the results: matplotlib figures (``plots``), the static
summary page (``page``) and the published site around asv's dashboard (``publish``)."""
