# aer: PCIe Advanced Error Reporting errors injected (HMP
# pcie_aer_inject_error) at the root port our device sits behind, rp0, while
# the driver's worker is busy and the device's receive stream runs (DMA in
# flight, dropped at the first uncorrectable error, which comes first: the
# stream's console lines would otherwise push the kernel's AER lines out of
# the log buffer these checks count in). QEMU injects only at devices it
# emulates AER for (not a vfio-user one, though ours has an AER capability),
# so the AER core reports each error at rp0 and recovers the devices below
# it, ours with our driver's error handlers:
# - an uncorrectable non-fatal one: the driver stops its worker and its
#   stream and says it can recover; MMIO enabled again, it checks the
#   device and resumes;
# - a correctable error: logged, nothing else;
# - an uncorrectable fatal one, with the device hung first (the `hang`
#   fault: its BARs answer all-ones, config space still answers, its AER
#   capability records an internal error; the worker must take it for hung,
#   not removed, and wait; error_detected reads and clears the device's
#   record): the link is frozen, the
#   driver asks for a reset; the AER core resets rp0's secondary bus (QEMU
#   passes the reset to the device server: the hang ends, every register
#   back to its power-on value), the driver re-initialises the device,
#   proves it with an operation and a DMA, and resumes;
# - a function reset outside error recovery (sysfs `reset`: the device has
#   FLR): the driver stops its worker, the device logs its reset, the driver
#   sets it up again and the worker reads on;
# - two more non-fatal ones: the first recovered, the second past the
#   driver's limit of three uncorrectable errors per binding: it lets go,
#   and the binding then ends cleanly at unbind.
check stream_offered device_sync '{"cmd":"set_knobs","stream":true}'
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
# The stream ran the judge's 10 rounds (STREAM_ROUNDS): each `# dma received`
# after the self-test's one is a stream DMA that moved its data.
check stream_ran wait_for 100 logged 11 "# dma received"
# Each step clears the kernel log first and waits for its own lines: the
# stream's lines may have pushed older ones out of the ring. After each
# recovery and the function reset the guest waits for the worker's first
# read (worker_reading) before it goes on: the judge wants one between
# injected errors.
clear_log
host aer rp0 POISON_TLP
check nonfatal_recovered wait_for 100 logged 1 "AER: device recovery successful"
check nonfatal_worker_reading wait_for 100 logged 1 "event worker_reading"
clear_log
host aer rp0 RCVR
check correctable_logged wait_for 100 logged 1 "AER: Correctable error message received"
check hang_armed arm hang 1
check worker_saw_hang wait_for 100 logged 1 "event worker_hung"
clear_log
host aer rp0 MALF_TLP
check fatal_recovered wait_for 100 logged 1 "AER: device recovery successful"
check fatal_worker_reading wait_for 100 logged 1 "event worker_reading"
clear_log
check function_reset put "$dev/reset" 1
check reset_done wait_for 100 logged 1 "event reset_done"
check reset_worker_reading wait_for 100 logged 1 "event worker_reading"
clear_log
host aer rp0 POISON_TLP
check third_recovered wait_for 100 logged 1 "AER: device recovery successful"
check third_worker_reading wait_for 100 logged 1 "event worker_reading"
clear_log
host aer rp0 POISON_TLP
check fourth_given_up wait_for 100 logged 1 "AER: device recovery failed"
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
