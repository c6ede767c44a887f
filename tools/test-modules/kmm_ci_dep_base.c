// SPDX-License-Identifier: GPL-2.0
// Exports a symbol that kmm_ci_dep_user uses, so modpost records
// "depends=kmm_ci_dep_base" in the user and insert order matters.
#include <linux/init.h>
#include <linux/module.h>

int kmm_ci_dep_base_value(void)
{
	return 42;
}
EXPORT_SYMBOL_GPL(kmm_ci_dep_base_value);

static int __init kmm_ci_dep_base_init(void)
{
	pr_info("kmm_ci_dep_base: loaded\n");
	return 0;
}

static void __exit kmm_ci_dep_base_exit(void)
{
	pr_info("kmm_ci_dep_base: unloaded\n");
}

module_init(kmm_ci_dep_base_init);
module_exit(kmm_ci_dep_base_exit);
MODULE_DESCRIPTION("kmodd CI test module exporting a symbol");
MODULE_VERSION("1.0.0");
MODULE_LICENSE("GPL");
