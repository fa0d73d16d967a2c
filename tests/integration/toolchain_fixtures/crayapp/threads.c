/* Number of threads that really ran an OpenMP parallel region. */
int crayapp_threads(void)
{
    int n = 0;
#pragma omp parallel reduction(+ : n)
    n += 1;
    return n;
}
