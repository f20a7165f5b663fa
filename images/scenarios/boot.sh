# boot: the guest is up; a Rust module loads and unloads.
check insmod_rust_minimal insmod /lib/modules/rust_minimal.ko
check rmmod_rust_minimal rmmod rust_minimal
