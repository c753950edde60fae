"""Pictures and pages from the results: matplotlib figures (``plots``), the static
summary page (``page``, its first screen in ``firstscreen``) and the published site
around asv's dashboard (``publish``, with ``staging`` and ``asv_site``)."""
