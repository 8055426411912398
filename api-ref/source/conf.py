# API reference of the server actions nova-cyborg adds to Nova's compute
# API, in the layout of Nova's own api-ref (os-api-ref). Built by
# ``tox -e api-ref``.

extensions = ['os_api_ref', 'openstackdocstheme']
html_theme = 'openstackdocs'
html_theme_options = {'sidebar_mode': 'toc'}
project = 'nova-cyborg API Reference'
copyright = '2026, nova-cyborg developers'
master_doc = 'index'
openstackdocs_repo_name = 'openstack/nova-cyborg'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
