# A guest that fakes a KUnit pass: KUnit ran (kunit.enable=1), then user
# space prints a passing suite of its own, once on the console and once into
# the kernel log (/dev/kmsg), where each line gets a real printk stamp. The
# harness must see that the kernel printed neither: the console copy has no
# syslog prefix, the /dev/kmsg copy user space's facility (LOG_USER).
for line in "    KTAP version 1" "    # Subtest: rust_doctests_fake" "    1..1" \
    "    ok 1 rust_doctest_kernel_fake_rs_0" "ok 2 rust_doctests_fake"; do
    echo "$line"
    echo "$line" > /dev/kmsg
done
