"""oslo.i18n integration for nova_cyborg."""

import oslo_i18n

_translators = oslo_i18n.TranslatorFactory(domain='nova_cyborg')

# The primary translation function using the well-known name "_"
_ = _translators.primary
