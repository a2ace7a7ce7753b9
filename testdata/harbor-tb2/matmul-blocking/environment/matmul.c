#include <stdio.h>

#define N 512
static double a[N][N], b[N][N], c[N][N];

int main(void) {
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			a[i][j] = (i * 7 + j) % 13;
			b[i][j] = (i + j * 3) % 11;
		}
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			for (int k = 0; k < N; k++)
				c[i][j] += a[i][k] * b[k][j];
	double sum = 0;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			sum += c[i][j] * ((i + j) % 5);
	printf("%.1f\n", sum);
	return 0;
}
