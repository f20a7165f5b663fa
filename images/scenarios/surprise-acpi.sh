# surprise-acpi: the surprise steps; only the machine differs (q35 with ACPI
# PCI hotplug: acpiphp ejects the device through _EJ0).
. /scenarios/surprise.sh
