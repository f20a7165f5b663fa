# A guest that fakes a KUnit pass: KUnit ran (kunit.enable=1), then user
# space prints a passing suite of its own. The harness must see that the
# kernel did not print it.
echo "    KTAP version 1"
echo "    # Subtest: rust_doctests_fake"
echo "    1..1"
echo "    ok 1 rust_doctest_kernel_fake_rs_0"
echo "ok 2 rust_doctests_fake"
