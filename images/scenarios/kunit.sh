# kunit: KUnit ran before init (kunit.enable=1); its KTAP is already on the
# console. Nothing to add here.
:
