"""The analyses: one module each, holding its pure function(s) and its declaration.

Every module here (not starting with ``_``) binds ``ANALYSIS`` to an
:class:`analytics.registry.Analysis`; the registry finds them by listing this
package, so a new analysis is a new module plus its expectation suite.
"""
