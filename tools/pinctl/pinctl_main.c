// SPDX-License-Identifier: MIT
#include "pinctl.h"

int main(int argc, char **argv)
{
	return pctl_main(argc, argv);
}
