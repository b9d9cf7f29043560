"""The code that runs inside the code task's sandboxes: the trust boundary on the file list.

``_judge.py`` (the judge sandbox's main program), ``_server.py`` (the candidate's and the reference's
server), ``_zygote.py`` (forking, confinement and clean-up between jobs), ``_wire.py`` (the plain-data
encoding between them) and ``_syntax.py`` (the judge's parse of the candidate). ``code/_lanes.py`` reads
them as text and ships them into each sandbox as ``/sandbox/<name>.py``; inside, they import only the
standard library and each other, by bare name.

The host imports none of them, with one exception on purpose: ``code/_reward.py`` imports ``_syntax``,
so that the reference's AST tokens and the similarity score are computed by the same definition as the
candidate's tokens in the judge. Tests import them to test them. ``tests/tasks/code/test_trust_boundary.py``
enforces all of this. This package's ``__init__`` stays empty: nothing here may run on the host by import.
"""
