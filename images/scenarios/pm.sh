# pm: system sleep with our driver bound and its worker busy, three times:
# s2idle through pm_test's `platform` level, which runs every device phase
# (the driver's sleep, then the PCI core saves config space and puts the
# device into D3hot), waits pm_test_delay seconds and resumes (the device back
# to D0, config space restored, the driver's wake) with no wakeup source
# needed, on every arch; each time the guest waits for the worker's first
# read after the wake before it goes on. The device comes back without its
# registers (no No_Soft_Reset): the driver must set it up again before using
# it. Then unbind.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
check pm_test_platform put /sys/power/pm_test platform
check pm_test_delay put /sys/module/suspend/parameters/pm_test_delay 1
check sleep_1 system_sleep
check sleep_2 system_sleep
check sleep_3 system_sleep
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
check unbound unbound
settle
