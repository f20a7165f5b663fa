# sweep-acpi: the sweep's steps; only the machine differs (q35 with ACPI PCI
# hotplug: acpiphp ejects the device through _EJ0) and the points, unplug
# and die ones only.
. /scenarios/sweep.sh
