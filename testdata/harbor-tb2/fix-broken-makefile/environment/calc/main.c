#include <stdio.h>
#include <stdlib.h>

int add(int a, int b);

int main(int argc, char **argv) {
	if (argc != 3) return 2;
	printf("%d\n", add(atoi(argv[1]), atoi(argv[2])));
	return 0;
}
